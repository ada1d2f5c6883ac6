//! What a loaded engine and its generations share.

use std::cell::{Cell, OnceCell, RefCell};
use std::sync::Arc;

use wasm_bindgen::prelude::*;
use wick::constrain::{Constraint, Grammar, GrammarCompiler};
use wick::gpu::GpuContext;
use wick::pipeline::Pipeline;
use wick::tokenizer::chat_template::{ChatTemplate, ChatTemplateError};
use wick::tokenizer::Tokenizer;

use crate::info::Info;
use crate::pipelines_ahead::PipelinesAhead;
use crate::{field_err, js_err};

/// What the engine and its generations share. The pipeline is borrowed for
/// the length of one GPU step; a second step while one runs is refused with
/// an error ("busy") rather than interleaved.
pub(crate) struct Shared {
    pub tokenizer: Tokenizer,
    pub pipeline: RefCell<Pipeline>,
    pub template: Result<ChatTemplate, ChatTemplateError>,
    pub info: Info,
    /// Bumped by every `start`: an older generation's state is gone.
    pub epoch: Cell<u64>,
    pub disposed: Cell<bool>,
    /// The vocabulary as llguidance sees it, built at the first constrained
    /// generation (a fraction of a second to a second) and kept.
    pub grammars: OnceCell<GrammarCompiler>,
    pub ctx: Arc<GpuContext>,
    /// The engine's drafting (`setSpeculation`), as `info()` reports it.
    pub speculation: Cell<wick::pipeline::speculative::Speculation>,
    /// Whether a draft model is attached (`setDraftModel`).
    pub draft_model: Cell<bool>,
    /// Pipelines the load created while the weights downloaded, settled
    /// by the warm-up.
    pub ahead: RefCell<Option<PipelinesAhead>>,
}

impl Shared {
    /// The grammar compiler over this model's vocabulary, built once.
    pub(crate) fn compiler(&self) -> Result<&GrammarCompiler, JsValue> {
        if let Some(c) = self.grammars.get() {
            return Ok(c);
        }
        let vocab = self.info.model.vocab_size;
        let c = GrammarCompiler::new(&self.tokenizer, vocab)
            .map_err(|e| js_err(format!("building the grammar vocabulary: {e}")))?;
        Ok(self.grammars.get_or_init(|| c))
    }

    /// `grammar` compiled against this model's vocabulary; a grammar that
    /// does not compile is an `InvalidRequestError` on `grammar`.
    pub(crate) fn constraint(&self, grammar: &Grammar) -> Result<Constraint, JsValue> {
        self.compiler()?.compile(grammar).map_err(|e| {
            field_err(
                "grammar",
                &format!("the {} does not compile: {e}", grammar.kind()),
            )
        })
    }
}
