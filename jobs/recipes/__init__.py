"""`sluice recipe run`: a recipe's jobs in order, rounds of back-/forward-translation and
training until the dev score stops improving (docs/recipes.md "Running a recipe")."""
