//! Deckhand-style document layering and substitution.
