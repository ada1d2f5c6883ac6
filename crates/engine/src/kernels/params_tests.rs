use crate::gpu::params::{KernelParams, ParamsField};
use crate::kernels::{attention, elementwise, embed, encoder, matmul, moe, norm, rope, sample};

/// Every parameter block a kernel dispatches with: its module and fields.
fn every_block() -> Vec<(&'static str, &'static str, &'static [ParamsField], usize)> {
    fn of<P: KernelParams>(
        name: &'static str,
    ) -> (&'static str, &'static str, &'static [ParamsField], usize) {
        (name, P::WGSL, P::FIELDS, std::mem::size_of::<P>())
    }
    vec![
        of::<attention::Params>("attention"),
        of::<attention::bidir::Params>("attention::bidir"),
        of::<attention::kv::Params>("attention::kv"),
        of::<elementwise::activation::Params>("elementwise::activation"),
        of::<elementwise::add::Params>("elementwise::add"),
        of::<elementwise::bias::Params>("elementwise::bias"),
        of::<elementwise::gelu::Params>("elementwise::gelu"),
        of::<embed::Params>("embed"),
        of::<encoder::embed::Params>("encoder::embed"),
        of::<encoder::pool::Params>("encoder::pool"),
        of::<matmul::tiled::Params>("matmul::tiled"),
        of::<matmul::x_ranges::Params>("matmul::x_ranges"),
        of::<moe::RouterParams>("moe::RouterParams"),
        of::<moe::GroupParams>("moe::GroupParams"),
        of::<moe::CombineParams>("moe::CombineParams"),
        of::<norm::head::Params>("norm::head"),
        of::<norm::layer::Params>("norm::layer"),
        of::<norm::rms::Params>("norm::rms"),
        of::<norm::rms_q8::Params>("norm::rms_q8"),
        of::<rope::Params>("rope"),
        of::<rope::bidir::Params>("rope::bidir"),
        of::<rope::kv::Params>("rope::kv"),
        of::<sample::Params>("sample"),
    ]
}

/// Each generated `struct Params`, parsed by naga (the WGSL front end wgpu
/// compiles with), has the Rust struct's members in order at the Rust
/// struct's offsets and sizes, and the same size in all.
#[test]
fn params_layouts_match_naga() {
    for (name, wgsl, fields, size) in every_block() {
        let module = naga::front::wgsl::parse_str(wgsl)
            .unwrap_or_else(|e| panic!("{name}: {}\n{wgsl}", e.emit_to_string(wgsl)));
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        let (handle, ty) = module
            .types
            .iter()
            .find(|(_, t)| t.name.as_deref() == Some("Params"))
            .unwrap_or_else(|| panic!("{name}: no struct Params in\n{wgsl}"));
        let naga::TypeInner::Struct { members, span } = &ty.inner else {
            panic!("{name}: Params is not a struct");
        };
        let got: Vec<ParamsField> = members
            .iter()
            .map(|m| ParamsField {
                name: m.name.clone().unwrap().leak(),
                offset: m.offset as usize,
                size: layouter[m.ty].size as usize,
            })
            .collect();
        assert_eq!(got, fields, "{name}: WGSL members against the Rust fields");
        assert_eq!(*span as usize, size, "{name}: struct size");
        assert_eq!(layouter[handle].size as usize, size, "{name}: layout size");
    }
}

/// The check above is only as good as the generation: swapping two fields
/// of a block in its WGSL alone (what a hand-written copy allowed) must be
/// told apart from the Rust order.
#[test]
fn a_swapped_wgsl_field_is_caught() {
    let (_, wgsl, fields, _) = every_block().remove(4); // elementwise::add
    let swapped = wgsl
        .replacen("a_offset", "tmp", 1)
        .replacen("b_offset", "a_offset", 1)
        .replacen("tmp", "b_offset", 1);
    let module = naga::front::wgsl::parse_str(&swapped).unwrap();
    let (_, ty) = module
        .types
        .iter()
        .find(|(_, t)| t.name.as_deref() == Some("Params"))
        .unwrap();
    let naga::TypeInner::Struct { members, .. } = &ty.inner else {
        unreachable!()
    };
    let names: Vec<_> = members.iter().map(|m| m.name.clone().unwrap()).collect();
    let rust: Vec<_> = fields.iter().map(|f| f.name.to_string()).collect();
    assert_ne!(names, rust);
}

/// No shader declares a `Params` of its own: the block comes from Rust.
#[test]
fn shaders_declare_no_params_of_their_own() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shaders");
    // The shaders sit in a folder per kernel family, a few at the top.
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            paths.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            paths.push(path);
        }
    }
    let mut seen = 0;
    for path in paths {
        if path.extension().is_some_and(|e| e == "wgsl") {
            seen += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains("struct Params"),
                "{}: declares struct Params; declare it with kernel_params! in Rust",
                path.display()
            );
        }
    }
    assert!(seen > 50, "found {seen} shaders in {dir}");
}
