"""Syncopate's Python front end: bring your own PyTorch model (syncopate.torch), and take a
trained model out of the cluster (syncopate.export, syncopate.models, syncopate.keys)."""
