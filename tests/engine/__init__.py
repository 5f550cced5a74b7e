"""The engine integration: the scratchpad's offload decisions and the model's read tool."""
