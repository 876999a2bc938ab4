"""Where a default comes from: each threshold measured on human translations and made-bad pairs."""
