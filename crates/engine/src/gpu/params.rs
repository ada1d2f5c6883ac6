//! A kernel's parameter block, written once, in Rust.
//!
//! `kernel_params!` declares the `#[repr(C)]` struct that a dispatch copies
//! into the step's uniform arena and, from the same field list, the WGSL
//! `struct Params` its shader reads (`KernelParams::WGSL`), which the
//! kernel's sources start with. No shader declares its own `Params`
//! (`kernels::params_tests` checks), so the two cannot
//! disagree: a field added, renamed, retyped or moved in Rust is what the
//! WGSL reads.
//!
//! Fields are 32-bit scalars (`u32`, `i32`, `f32`), each 4 bytes at a
//! 4-byte alignment both in `repr(C)` and in WGSL's uniform layout, so the
//! offsets agree by construction; `kernels::params_tests` checks each
//! generated struct against naga's layout anyway. A uniform binding needs
//! no padding to 16 bytes: each block has a 256-byte slot of its own.

/// A parameter block: plain bytes for the uniform arena, with its WGSL.
pub trait KernelParams: bytemuck::Pod {
    /// `struct Params { ... }`, the fields in order, for the shader.
    const WGSL: &'static str;
    /// Each field's name, byte offset and size, in order.
    const FIELDS: &'static [ParamsField];
}

/// One field of a parameter block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamsField {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
}

/// The scalar types a parameter block may hold: their Rust name is their
/// WGSL name.
pub trait WgslScalar: bytemuck::Pod {}
impl WgslScalar for u32 {}
impl WgslScalar for i32 {}
impl WgslScalar for f32 {}

/// Declares a parameter block: the struct (with `Clone`, `Copy`, `Pod`,
/// `Zeroable`) and its `KernelParams` impl.
macro_rules! kernel_params {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field_vis:vis $field:ident : $ty:ident
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
        $vis struct $name {
            $(
                $(#[$field_meta])*
                $field_vis $field: $ty,
            )*
        }

        impl $crate::gpu::params::KernelParams for $name {
            const WGSL: &'static str = concat!(
                "struct Params {\n",
                $("    ", stringify!($field), ": ", stringify!($ty), ",\n",)*
                "}\n"
            );
            const FIELDS: &'static [$crate::gpu::params::ParamsField] = &[$(
                $crate::gpu::params::ParamsField {
                    name: stringify!($field),
                    offset: ::core::mem::offset_of!($name, $field),
                    size: ::core::mem::size_of::<$ty>(),
                },
            )*];
        }

        const _: () = {
            const fn scalar<T: $crate::gpu::params::WgslScalar>() {}
            $(scalar::<$ty>();)*
        };
    };
}
pub(crate) use kernel_params;
