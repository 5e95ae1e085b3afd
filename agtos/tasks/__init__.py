"""Small, pure, testable steps. Each module does one thing; I/O only where its name says."""
