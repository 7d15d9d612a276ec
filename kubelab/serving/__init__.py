"""Services: long-running servers started from a spec (models through the Open Inference Protocol)."""
