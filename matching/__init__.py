"""Adversarial matching: scorers, weight matrix, bipartite matching rounds, distractors.

Heavy libraries (torch, sentence-transformers) are imported inside functions only.
"""
