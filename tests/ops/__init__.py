"""Operations: the scratchvault command and doctor."""
