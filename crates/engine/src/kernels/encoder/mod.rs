//! What only the encoders (BERT, nomic-bert, EmbeddingGemma) run: their
//! embeddings (token, position and type rows, LayerNorm) and the pooling of
//! a sentence's rows into one vector.

pub mod embed;
pub mod pool;
