"""One module per CLI subcommand; each is imported only when its command runs."""
