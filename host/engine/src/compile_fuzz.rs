//! Fuzzing of the compile path: generated components (core modules of random nesting,
//! locals, globals, tables and memories, instantiated any number of times), some with
//! their bytes mutated, loaded by an engine with small shape limits. Loading never
//! panics; a component past a limit is refused naming that limit before it is compiled;
//! the rest compile, and are then found to be no transform.

use std::path::Path;

use sluice_fuzzing::{Gen, fuzz};

use crate::error::{CompileLimit, EngineError};
use crate::limits::InstanceLimits;
use crate::module::{EngineConfig, TransformEngine};
use crate::shape::ModuleShape;

/// Limits small enough that generated components pass them often and fail them often.
const LIMITS: ModuleShape = ModuleShape {
    function_body_bytes: 4096,
    locals_per_function: 40,
    nesting_depth: 24,
    functions_per_module: 12,
    types_per_module: 12,
    globals_per_module: 12,
    tables_per_module: 2,
    memories_per_module: 1,
    core_modules: 3,
    core_instances: 4,
};

/// A core module in text, and the shape it was generated with.
fn core_module(g: &mut Gen, shape: &mut ModuleShape) -> String {
    let mut text = String::from("(core module");
    let globals = g.size(16);
    for i in 0..globals {
        text.push_str(&format!(" (global (mut i32) (i32.const {i}))"));
    }
    let tables = g.size(3);
    for _ in 0..tables {
        text.push_str(&format!(" (table {} funcref)", g.size(64)));
    }
    let memories = usize::from(g.one_in(2));
    for _ in 0..memories {
        text.push_str(" (memory 0 1)");
    }
    let functions = g.size(16);
    for _ in 0..functions {
        let locals = g.size(48);
        let depth = g.size(30);
        text.push_str(" (func");
        for _ in 0..locals {
            text.push_str(" (local i64)");
        }
        for _ in 0..depth {
            text.push_str(if g.one_in(2) { " (loop" } else { " (block" });
        }
        text.push_str(" nop");
        text.push_str(&")".repeat(depth));
        text.push(')');
        shape.locals_per_function = shape.locals_per_function.max(locals as u64);
        shape.nesting_depth = shape.nesting_depth.max(depth);
    }
    text.push(')');
    shape.globals_per_module = shape.globals_per_module.max(globals);
    shape.tables_per_module = shape.tables_per_module.max(tables);
    shape.memories_per_module = shape.memories_per_module.max(memories);
    shape.functions_per_module = shape.functions_per_module.max(functions);
    text
}

/// A component of generated core modules, each instantiated some times; and the shape
/// it was generated with (function sizes and types aside).
fn component(g: &mut Gen) -> (Vec<u8>, ModuleShape) {
    let mut shape = ModuleShape::default();
    let modules = 1 + g.size(3);
    let mut text = String::from("(component");
    for _ in 0..modules {
        text.push(' ');
        text.push_str(&core_module(g, &mut shape));
    }
    for module in 0..modules {
        for _ in 0..g.size(3) {
            text.push_str(&format!(" (core instance (instantiate {module}))"));
            shape.core_instances += 1;
        }
    }
    text.push(')');
    shape.core_modules = modules;
    (wat::parse_str(&text).expect("generated text parses"), shape)
}

/// The limit a generated shape passes first, in [`ModuleShape::excess`]'s order, for
/// the dimensions the generator controls.
fn expected_excess(shape: &ModuleShape) -> Option<&'static str> {
    let measured = ModuleShape {
        function_body_bytes: 0,
        types_per_module: 0,
        ..shape.clone()
    };
    measured.excess(&LIMITS).map(|excess| excess.what)
}

#[test]
fn fuzz_the_compile_path() {
    let engine = TransformEngine::new(EngineConfig {
        pooled_instances: 0,
        compile_worker: None,
        shape_limits: LIMITS,
        max_kept_modules: 4,
        ..EngineConfig::default()
    })
    .unwrap();
    let mut refused = 0u64;
    let report = fuzz("compile-path", |g| {
        let (bytes, shape) = component(g);
        let mutated = g.one_in(4);
        let bytes = if mutated {
            g.mutate_bytes(&bytes)
        } else {
            bytes
        };
        let result = engine.load_bytes(
            "fuzz",
            "fuzzed",
            Path::new("fuzzed.wasm"),
            &bytes,
            InstanceLimits::default(),
        );
        let error = match result {
            Ok(_) => panic!("a generated component is no transform, yet it loaded"),
            Err(error) => error,
        };
        if let EngineError::CompileLimit { .. } = error {
            refused += 1;
        }
        if mutated {
            return;
        }
        // The body size and types are not generated to a limit: only a refusal for
        // them may differ from what the generator expects.
        match (&error, expected_excess(&shape)) {
            (
                EngineError::CompileLimit {
                    limit: CompileLimit::Shape(excess),
                    ..
                },
                Some(what),
            ) => assert_eq!(excess.what, what, "{error}"),
            (
                EngineError::CompileLimit {
                    limit: CompileLimit::Shape(excess),
                    ..
                },
                None,
            ) => assert!(
                excess.what.contains("function body") || excess.what.contains("types"),
                "{error}"
            ),
            (_, Some(what)) => panic!("a component past `{what}` was not refused: {error}"),
            // Within the limits: compiled, then found to be no transform.
            (_, None) => assert!(
                matches!(error, EngineError::NotATransform { .. }),
                "{error}"
            ),
        }
    });
    assert!(report.cases > 0);
    assert!(refused > 0, "no generated component passed a limit");
}
