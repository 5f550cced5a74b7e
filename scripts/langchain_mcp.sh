# scripts/langchain_mcp.sh — the virtualenv of LangChain's MCP client (langchain-mcp-adapters), which the proxy test
# tests/integrations/test_mcp_proxy_langchain.py runs in front of "scratchvault mcp --wrap". It is a venv of its own
# because langchain-mcp-adapters requires the MCP SDK 1.x and the project's venv has 2.x; MCP is a wire protocol and
# the proxy its own process, so the two never share an interpreter.
#
# Installed from the pinned tests/integrations/langchain_mcp_client.txt into the user's cache
# (~/.cache/scratchvault/langchain-mcp-<first 16 hex of the file's sha256>; outside the checkout, which the mutants
# copy), so a changed pin list makes a new one and a later run installs nothing. A venv counts as made only once its
# stamp file is written after the install succeeded: an interrupted install is made again.
#
# Sourced by scripts/run (needs die, step, quietly, ROOT, VENV), before HOME is swapped for a throwaway one; exports
# SCRATCHVAULT_LANGCHAIN_MCP_PYTHON and SCRATCHVAULT_LANGCHAIN_MCP_REQUIRED=1. Run by hand
# ("bash scripts/langchain_mcp.sh"), it makes the venv with the python of the project's .venv (VENV names another)
# and prints the new venv's python.

LANGCHAIN_MCP_PINS=tests/integrations/langchain_mcp_client.txt
LANGCHAIN_MCP_STAMP=.scratchvault-complete

# Prints the venv's directory for the pin list of this checkout.
langchain_mcp_dir() {
    local sum
    sum="$(sha256sum "$ROOT/$LANGCHAIN_MCP_PINS" | cut -c1-16)"
    echo "${XDG_CACHE_HOME:-$HOME/.cache}/scratchvault/langchain-mcp-$sum"
}

ensure_langchain_mcp_env() {
    local dir
    dir="$(langchain_mcp_dir)"
    if [[ ! -f "$dir/$LANGCHAIN_MCP_STAMP" ]]; then
        step "LangChain's MCP client venv (pinned in $LANGCHAIN_MCP_PINS; cached in $dir)"
        rm -rf "$dir"
        quietly "$VENV/bin/python" -m venv "$dir" || die "could not make the venv $dir"
        quietly "$dir/bin/pip" install --disable-pip-version-check -r "$ROOT/$LANGCHAIN_MCP_PINS" ||
            die "pip install -r $LANGCHAIN_MCP_PINS into $dir failed"
        touch "$dir/$LANGCHAIN_MCP_STAMP"
    fi
    export SCRATCHVAULT_LANGCHAIN_MCP_PYTHON="$dir/bin/python"
    export SCRATCHVAULT_LANGCHAIN_MCP_REQUIRED=1
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    VENV="${VENV:-$ROOT/.venv}"
    step() { echo "==> $*" >&2; }
    die() { echo "scripts/langchain_mcp.sh: error: $*" >&2; exit 1; }
    quietly() { "$@" >&2; }
    ensure_langchain_mcp_env
    echo "$SCRATCHVAULT_LANGCHAIN_MCP_PYTHON"
fi
