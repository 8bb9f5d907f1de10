"""``python -m corral`` runs the CLI."""

from corral.launch import main

main()
