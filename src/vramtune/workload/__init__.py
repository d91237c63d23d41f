"""What to train: Brax batch rules, environment sources, profiles, config files, and the
child-side builders."""
