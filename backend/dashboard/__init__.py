"""Server-rendered dashboard pages (owned by the dashboard engineer)."""
