//! The fuzz targets' tests, in one binary: past findings and the seeds.

mod hf_folder;
mod regressions;
