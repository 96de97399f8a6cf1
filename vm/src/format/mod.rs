//! The binary executable format (`.rvx`): see `docs/format.md`.
