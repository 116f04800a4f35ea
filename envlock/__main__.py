"""``python -m envlock``."""

from envlock.cli import main

if __name__ == "__main__":
    main()
