"""Where the numbers come from: device statistics, live arrays, compiled programs, host memory, the programs a test lowers and their compile for a TPU target. Nothing here decides or prints."""
