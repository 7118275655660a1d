"""Communication: collectives, algorithms, NCCL protocols, topologies, and the CommModel every command prices with.

Submodules are imported on use (the drill's start-up path loads only what it needs).
"""
