"""One trial, measured honestly: the cap, the child process, outside sampling, executors."""
