"""vramtune: measure, don't guess, how many parallel envs fit and run fastest."""

__version__ = "0.1.0"
