"""The speedrun leaderboard (experimental): LEADERBOARD.md and its three commands (SPEEDRUN.md)."""
