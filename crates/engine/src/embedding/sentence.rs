//! sentence-transformers' description of how a model's token rows become one
//! embedding: `modules.json` (the module list), the Pooling module's
//! `config.json` and `sentence_bert_config.json` (the longest input). A
//! folder without `modules.json` is a plain encoder: mean pooling and L2
//! normalisation, as sentence-transformers itself assumes for one.

use serde::Deserialize;

use super::error::EmbedError;
use crate::kernels::pool::PoolMode;

/// What follows the encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentenceConfig {
    pub pooling: PoolMode,
    /// An L2 `Normalize` module follows the pooling.
    pub normalize: bool,
    /// `sentence_bert_config.json`'s `max_seq_length`, when there is one:
    /// the longest input (in tokens) the model was trained for.
    pub max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct Module {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    path: String,
}

#[derive(Deserialize)]
struct Pooling {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

#[derive(Deserialize)]
struct SentenceBert {
    max_seq_length: Option<u64>,
}

/// The files, as bytes (the engine has no filesystem).
#[derive(Clone, Copy, Default)]
pub struct SentenceFiles<'a> {
    pub modules: Option<&'a [u8]>,
    /// The Pooling module's `config.json` (in the folder `modules.json` names).
    pub pooling: Option<&'a [u8]>,
    pub sentence_bert: Option<&'a [u8]>,
}

fn err(what: String) -> EmbedError {
    EmbedError::SentenceConfig(what)
}

/// The Pooling module's folder, from `modules.json` (to find its config).
pub fn pooling_path(modules_json: &[u8]) -> Result<Option<String>, EmbedError> {
    let modules: Vec<Module> =
        serde_json::from_slice(modules_json).map_err(|e| err(format!("modules.json: {e}")))?;
    Ok(modules
        .into_iter()
        .find(|m| m.kind.ends_with(".Pooling"))
        .map(|m| m.path))
}

impl SentenceConfig {
    pub fn parse(files: &SentenceFiles) -> Result<SentenceConfig, EmbedError> {
        let max_seq_length = match files.sentence_bert {
            Some(json) => {
                let raw: SentenceBert = serde_json::from_slice(json)
                    .map_err(|e| err(format!("sentence_bert_config.json: {e}")))?;
                raw.max_seq_length.map(|n| n as usize).filter(|&n| n > 0)
            }
            None => None,
        };
        let Some(modules_json) = files.modules else {
            return Ok(SentenceConfig {
                pooling: PoolMode::Mean,
                normalize: true,
                max_seq_length,
            });
        };
        let modules: Vec<Module> =
            serde_json::from_slice(modules_json).map_err(|e| err(format!("modules.json: {e}")))?;
        let mut pooling = None;
        let mut normalize = false;
        for (i, m) in modules.iter().enumerate() {
            let name = m.kind.rsplit('.').next().unwrap_or(&m.kind);
            match name {
                "Transformer" if i == 0 => {}
                "Pooling" if pooling.is_none() => {
                    let json = files.pooling.ok_or_else(|| {
                        err(format!(
                            "modules.json has a Pooling module but its {}/config.json is missing",
                            m.path
                        ))
                    })?;
                    pooling = Some(pooling_mode(json)?);
                }
                "Normalize" if pooling.is_some() && i + 1 == modules.len() => normalize = true,
                _ => {
                    return Err(err(format!(
                    "module {i} '{}' (wick runs Transformer, Pooling, then optionally Normalize)",
                    m.kind
                )))
                }
            }
        }
        let pooling = pooling.ok_or_else(|| err("modules.json has no Pooling module".into()))?;
        Ok(SentenceConfig {
            pooling,
            normalize,
            max_seq_length,
        })
    }
}

fn pooling_mode(json: &[u8]) -> Result<PoolMode, EmbedError> {
    let p: Pooling =
        serde_json::from_slice(json).map_err(|e| err(format!("pooling config: {e}")))?;
    let unsupported = [
        (p.pooling_mode_max_tokens, "max_tokens"),
        (p.pooling_mode_mean_sqrt_len_tokens, "mean_sqrt_len_tokens"),
        (p.pooling_mode_weightedmean_tokens, "weightedmean_tokens"),
    ];
    if let Some((_, name)) = unsupported.iter().find(|(on, _)| *on) {
        return Err(err(format!(
            "pooling mode {name} is not implemented (wick pools by mean, CLS or last token)"
        )));
    }
    match (p.pooling_mode_mean_tokens, p.pooling_mode_cls_token, p.pooling_mode_lasttoken) {
        (true, false, false) => Ok(PoolMode::Mean),
        (false, true, false) => Ok(PoolMode::First),
        (false, false, true) => Ok(PoolMode::Last),
        _ => Err(err("the pooling config must turn on exactly one of mean_tokens, cls_token, lasttoken (concatenated modes are not implemented)".into())),
    }
}

/// L2-normalises `v` in place (a zero vector stays zero, as
/// `torch.nn.functional.normalize` leaves it).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x = (*x as f64 / norm) as f32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULES: &str = r#"[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]"#;
    const MEAN: &str = r#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": false,
        "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false}"#;

    fn parse(modules: &str, pooling: &str) -> Result<SentenceConfig, EmbedError> {
        SentenceConfig::parse(&SentenceFiles {
            modules: Some(modules.as_bytes()),
            pooling: Some(pooling.as_bytes()),
            sentence_bert: Some(br#"{"max_seq_length": 256, "do_lower_case": false}"#),
        })
    }

    #[test]
    fn reads_minilm_modules() {
        let c = parse(MODULES, MEAN).unwrap();
        assert_eq!(
            c,
            SentenceConfig {
                pooling: PoolMode::Mean,
                normalize: true,
                max_seq_length: Some(256)
            }
        );
        assert_eq!(
            pooling_path(MODULES.as_bytes()).unwrap().as_deref(),
            Some("1_Pooling")
        );
        let cls = MEAN
            .replace(
                r#""pooling_mode_cls_token": false"#,
                r#""pooling_mode_cls_token": true"#,
            )
            .replace(
                r#""pooling_mode_mean_tokens": true"#,
                r#""pooling_mode_mean_tokens": false"#,
            );
        assert_eq!(parse(MODULES, &cls).unwrap().pooling, PoolMode::First);
        let no_norm = MODULES.replace(r#",
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}"#, "");
        assert!(!parse(&no_norm, MEAN).unwrap().normalize);
    }

    #[test]
    fn refuses_modules_and_modes_it_does_not_run() {
        let max = MEAN.replace(
            r#""pooling_mode_max_tokens": false"#,
            r#""pooling_mode_max_tokens": true"#,
        );
        assert!(parse(MODULES, &max)
            .unwrap_err()
            .to_string()
            .contains("max_tokens"));
        let dense = MODULES.replace("models.Normalize", "models.Dense");
        assert!(parse(&dense, MEAN)
            .unwrap_err()
            .to_string()
            .contains("Dense"));
    }

    #[test]
    fn normalizes_to_unit_length() {
        let mut v = [3.0f32, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        let mut z = [0.0f32; 3];
        l2_normalize(&mut z);
        assert_eq!(z, [0.0; 3]);
    }
}
