"""What to run next and what to pick: the planner, the sweep loop, recommendations, budgets
and the bench gate. Pure logic around the executor interface."""
