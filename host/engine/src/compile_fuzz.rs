//! Fuzzing of the compile path: generated components (core modules of random nesting,
//! locals, globals, tables and memories, instantiated any number of times), some with
//! their bytes mutated, loaded by an engine with small shape limits. Loading never
//! panics; a component past a limit is refused naming that limit before it is compiled;
//! the rest compile, and are then found to be no transform.

use std::path::Path;

use sluice_fuzzing::fuzz;
use sluice_fuzzing::proptest::option;
use sluice_fuzzing::proptest::prelude::*;
use sluice_fuzzing::strategies::{byte_edits, list, size};

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

/// A core module to generate: its globals, the sizes of its tables, whether it has a
/// memory, and its functions.
#[derive(Clone, Debug)]
struct CoreModule {
    globals: usize,
    tables: Vec<usize>,
    memory: bool,
    functions: Vec<Function>,
}

/// A function: its locals, and its nested blocks, outermost first (`true` a loop).
#[derive(Clone, Debug)]
struct Function {
    locals: usize,
    blocks: Vec<bool>,
}

/// A component: its core modules, each with how many times it is instantiated.
#[derive(Clone, Debug)]
struct Component {
    modules: Vec<(CoreModule, usize)>,
}

fn core_module() -> impl Strategy<Value = CoreModule> + Clone {
    let function = (size(48), list(any::<bool>(), 30))
        .prop_map(|(locals, blocks)| Function { locals, blocks });
    (
        size(16),
        list(size(64), 3),
        any::<bool>(),
        list(function, 16),
    )
        .prop_map(|(globals, tables, memory, functions)| CoreModule {
            globals,
            tables,
            memory,
            functions,
        })
}

fn component() -> impl Strategy<Value = Component> {
    let module = (core_module(), size(3));
    (module.clone(), list(module, 3)).prop_map(|(first, rest)| Component {
        modules: std::iter::once(first).chain(rest).collect(),
    })
}

impl CoreModule {
    /// The module in text; `shape` grows to take it in.
    fn text(&self, shape: &mut ModuleShape) -> String {
        let mut text = String::from("(core module");
        for i in 0..self.globals {
            text.push_str(&format!(" (global (mut i32) (i32.const {i}))"));
        }
        for entries in &self.tables {
            text.push_str(&format!(" (table {entries} funcref)"));
        }
        if self.memory {
            text.push_str(" (memory 0 1)");
        }
        for function in &self.functions {
            text.push_str(" (func");
            text.push_str(&" (local i64)".repeat(function.locals));
            for &looped in &function.blocks {
                text.push_str(if looped { " (loop" } else { " (block" });
            }
            text.push_str(" nop");
            text.push_str(&")".repeat(function.blocks.len()));
            text.push(')');
            shape.locals_per_function = shape.locals_per_function.max(function.locals as u64);
            shape.nesting_depth = shape.nesting_depth.max(function.blocks.len());
        }
        text.push(')');
        shape.globals_per_module = shape.globals_per_module.max(self.globals);
        shape.tables_per_module = shape.tables_per_module.max(self.tables.len());
        shape.memories_per_module = shape.memories_per_module.max(usize::from(self.memory));
        shape.functions_per_module = shape.functions_per_module.max(self.functions.len());
        text
    }
}

impl Component {
    /// The component in binary, and the shape it was generated with (function sizes
    /// and types aside).
    fn bytes(&self) -> (Vec<u8>, ModuleShape) {
        let mut shape = ModuleShape::default();
        let mut text = String::from("(component");
        for (module, _) in &self.modules {
            text.push(' ');
            text.push_str(&module.text(&mut shape));
        }
        for (index, (_, instances)) in self.modules.iter().enumerate() {
            for _ in 0..*instances {
                text.push_str(&format!(" (core instance (instantiate {index}))"));
                shape.core_instances += 1;
            }
        }
        text.push(')');
        shape.core_modules = self.modules.len();
        (wat::parse_str(&text).expect("generated text parses"), shape)
    }
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
    // A quarter of the components have their bytes edited.
    let case = (component(), option::weighted(0.25, byte_edits()));
    let report = fuzz("compile-path", case, |(component, edits)| {
        let (bytes, shape) = component.bytes();
        let mutated = edits.is_some();
        let bytes = match edits {
            Some(edits) => edits.apply(&bytes),
            None => bytes,
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
