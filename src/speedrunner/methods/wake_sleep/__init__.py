"""Wake/sleep methods: react, opo, speedrunner, speedrunner_no_cl, asi."""
