"""Voyager on Crafter: curriculum, action agent, critic, skill manager."""
