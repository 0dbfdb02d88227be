"""Syncopate's Python front end: bring your own PyTorch model (syncopate.torch)."""
