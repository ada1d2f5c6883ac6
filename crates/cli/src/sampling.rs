//! The sampling flags `generate` and `chat` share, checked before a model
//! loads so a bad value costs no load.

use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stop_strings::StopStrings;

#[derive(clap::Args)]
pub struct SamplingArgs {
    /// 0 samples greedily.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// 0 keeps every token.
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop where the text contains this string (not printed); up to 4.
    #[arg(long = "stop", value_name = "S")]
    pub stop: Vec<String>,
}

impl SamplingArgs {
    /// The sampler's settings, validated, with the stop strings checked too
    /// (`Engine::complete` checks them again, after the load).
    pub fn params(&self) -> Result<SamplingParams, wick::WickError> {
        let sampling = SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            seed: self.seed,
            ..Default::default()
        };
        sampling.validate()?;
        StopStrings::new(&self.stop)?;
        Ok(sampling)
    }
}
