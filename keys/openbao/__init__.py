"""Keys in OpenBao: a keyring backend for several machines sharing one vault (docs/openbao.md)."""

from keys.openbao.backend import OpenBaoKeyring
from keys.openbao.config import OpenBaoConfig

__all__ = ["OpenBaoConfig", "OpenBaoKeyring"]
