"""A SpeedRunner plug-in: the ``corridor`` benchmark and the ``tally`` method."""
