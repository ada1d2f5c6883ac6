//! sentence-transformers' description of how a model's token rows become one
//! embedding: `modules.json` (the module list), the Pooling module's
//! `config.json`, any Dense modules' `config.json` (a linear layer on the
//! pooled vector: EmbeddingGemma's 768 -> 3072 -> 768) and
//! `sentence_bert_config.json` (the longest input). A folder without
//! `modules.json` is a plain encoder: mean pooling and L2 normalisation, as
//! sentence-transformers itself assumes for one.

use serde::Deserialize;

use super::error::EmbedError;
use crate::kernels::encoder::pool::PoolMode;

/// One Dense module: `out = W x (+ b)`, W `[out_features][in_features]`
/// (its `model.safetensors`: `linear.weight`, and `linear.bias` when `bias`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseSpec {
    pub in_features: usize,
    pub out_features: usize,
    pub bias: bool,
}

/// What follows the encoder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentenceConfig {
    pub pooling: PoolMode,
    /// Dense modules after the pooling, in order.
    pub dense: Vec<DenseSpec>,
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
struct DenseRaw {
    in_features: u64,
    out_features: u64,
    #[serde(default = "yes")]
    bias: bool,
    #[serde(default = "identity")]
    activation_function: String,
}

fn yes() -> bool {
    true
}
fn identity() -> String {
    "torch.nn.modules.linear.Identity".into()
}

#[derive(Deserialize)]
struct SentenceBert {
    max_seq_length: Option<u64>,
}

/// One Dense module's files.
#[derive(Clone, Copy)]
pub struct DenseFiles<'a> {
    pub config: &'a [u8],
    pub safetensors: &'a [u8],
}

/// The files, as bytes (the engine has no filesystem).
#[derive(Clone, Copy, Default)]
pub struct SentenceFiles<'a> {
    pub modules: Option<&'a [u8]>,
    /// The Pooling module's `config.json` (in the folder `modules.json` names).
    pub pooling: Option<&'a [u8]>,
    /// The Dense modules' files, in the order of `dense_paths`.
    pub dense: &'a [DenseFiles<'a>],
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

/// The Dense modules' folders, in order, from `modules.json` (each holds a
/// `config.json` and a `model.safetensors`).
pub fn dense_paths(modules_json: &[u8]) -> Result<Vec<String>, EmbedError> {
    let modules: Vec<Module> =
        serde_json::from_slice(modules_json).map_err(|e| err(format!("modules.json: {e}")))?;
    Ok(modules
        .into_iter()
        .filter(|m| m.kind.ends_with(".Dense"))
        .map(|m| m.path)
        .collect())
}

fn dense_spec(path: &str, json: &[u8]) -> Result<DenseSpec, EmbedError> {
    let raw: DenseRaw =
        serde_json::from_slice(json).map_err(|e| err(format!("{path}/config.json: {e}")))?;
    if !raw.activation_function.ends_with(".Identity") {
        return Err(err(format!(
            "{path}: activation '{}' (wick runs Dense modules without an activation, torch.nn.Identity)",
            raw.activation_function
        )));
    }
    let features = |key: &str, v: u64| {
        if v == 0 || v > 1 << 16 {
            Err(err(format!("{path}: {key} {v}")))
        } else {
            Ok(v as usize)
        }
    };
    Ok(DenseSpec {
        in_features: features("in_features", raw.in_features)?,
        out_features: features("out_features", raw.out_features)?,
        bias: raw.bias,
    })
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
                dense: Vec::new(),
                normalize: true,
                max_seq_length,
            });
        };
        let modules: Vec<Module> =
            serde_json::from_slice(modules_json).map_err(|e| err(format!("modules.json: {e}")))?;
        let mut pooling = None;
        let mut dense = Vec::new();
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
                "Dense" if pooling.is_some() => {
                    let files = files.dense.get(dense.len()).ok_or_else(|| {
                        err(format!(
                            "modules.json has a Dense module in '{}' but its files were not given",
                            m.path
                        ))
                    })?;
                    dense.push(dense_spec(&m.path, files.config)?);
                }
                "Normalize" if pooling.is_some() && i + 1 == modules.len() => normalize = true,
                _ => {
                    return Err(err(format!(
                    "module {i} '{}' (wick runs Transformer, Pooling, optionally Dense modules, then optionally Normalize)",
                    m.kind
                )))
                }
            }
        }
        let pooling = pooling.ok_or_else(|| err("modules.json has no Pooling module".into()))?;
        if files.dense.len() > dense.len() {
            return Err(err(format!(
                "{} Dense modules' files given for the {} modules.json lists",
                files.dense.len(),
                dense.len()
            )));
        }
        Ok(SentenceConfig {
            pooling,
            dense,
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
            dense: &[],
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
                dense: Vec::new(),
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
            .contains("Dense module in '2_Normalize' but its files were not given"));
        let lstm = MODULES.replace("models.Normalize", "models.LSTM");
        assert!(parse(&lstm, MEAN).unwrap_err().to_string().contains("LSTM"));
    }

    /// EmbeddingGemma's modules: Transformer, Pooling, Dense 768 -> 3072,
    /// Dense 3072 -> 768 (no biases), Normalize.
    const GEMMA_MODULES: &str = r#"[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 4, "name": "4", "path": "4_Normalize", "type": "sentence_transformers.models.Normalize"}]"#;
    const UP: &str = r#"{"in_features": 768, "out_features": 3072, "bias": false,
        "activation_function": "torch.nn.modules.linear.Identity"}"#;
    const DOWN: &str = r#"{"in_features": 3072, "out_features": 768, "bias": false,
        "activation_function": "torch.nn.modules.linear.Identity"}"#;

    fn parse_dense(configs: &[&str]) -> Result<SentenceConfig, EmbedError> {
        let dense: Vec<DenseFiles> = configs
            .iter()
            .map(|c| DenseFiles {
                config: c.as_bytes(),
                safetensors: &[],
            })
            .collect();
        SentenceConfig::parse(&SentenceFiles {
            modules: Some(GEMMA_MODULES.as_bytes()),
            pooling: Some(MEAN.as_bytes()),
            dense: &dense,
            sentence_bert: None,
        })
    }

    #[test]
    fn reads_dense_modules_in_order() {
        assert_eq!(
            dense_paths(GEMMA_MODULES.as_bytes()).unwrap(),
            ["2_Dense", "3_Dense"]
        );
        let c = parse_dense(&[UP, DOWN]).unwrap();
        let spec = |i, o| DenseSpec {
            in_features: i,
            out_features: o,
            bias: false,
        };
        assert_eq!(c.dense, [spec(768, 3072), spec(3072, 768)]);
        assert!(c.normalize);
        let tanh = DOWN.replace(
            "torch.nn.modules.linear.Identity",
            "torch.nn.modules.activation.Tanh",
        );
        let e = parse_dense(&[UP, &tanh]).unwrap_err().to_string();
        assert!(e.contains("3_Dense") && e.contains("Tanh"), "{e}");
        let e = parse_dense(&[UP]).unwrap_err().to_string();
        assert!(e.contains("'3_Dense' but its files were not given"), "{e}");
        let e = parse_dense(&[UP, DOWN, DOWN]).unwrap_err().to_string();
        assert!(e.contains("3 Dense modules' files given for the 2"), "{e}");
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
