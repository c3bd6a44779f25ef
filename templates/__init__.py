"""Chat templates (.jinja) and report templates shipped as package data.

Has an ``__init__`` so ``importlib.resources`` finds it under an editable install.
"""
