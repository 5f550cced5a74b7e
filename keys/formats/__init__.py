"""The row formats, byte by byte: STREAM chunking (``stream``), the data key (``data_key``), one module per row
format (``v1``, ``v2``, ``v3``) and ``dispatch``, the one place that tells the formats of a stored part apart."""
