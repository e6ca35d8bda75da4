"""What is decided from the readings: the peak and its witness, a budget, the leak rule, a budget on a TPU target, out of memory. Each check gives one frozen result."""
