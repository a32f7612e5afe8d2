//! A component's shape, read before it is compiled: how many functions, locals, types,
//! globals, tables and memories its core modules declare, and how large and deeply
//! nested their functions are. Cranelift's compile time and memory grow faster than a
//! module's size in some of these (one function of millions of nested loops, tens of
//! thousands of locals), so a module past the limits is refused before any code is
//! compiled, with the limit named. The walk itself is linear in the module's size.

use wasmtime::wasmparser::{Operator, Parser, Payload};

/// The largest of each thing found in a component (per core module or per function),
/// and the component's totals; or the most of each a host compiles
/// ([`ModuleShape::LIMITS`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleShape {
    /// Bytes of the largest function body.
    pub function_body_bytes: usize,
    /// Most locals of one function.
    pub locals_per_function: u64,
    /// Deepest nesting of one function.
    pub nesting_depth: usize,
    /// Most functions defined by one core module.
    pub functions_per_module: usize,
    /// Most types declared by one core module.
    pub types_per_module: usize,
    /// Most globals defined by one core module.
    pub globals_per_module: usize,
    /// Most tables defined by one core module.
    pub tables_per_module: usize,
    /// Most memories defined by one core module.
    pub memories_per_module: usize,
    /// Core modules in the component.
    pub core_modules: usize,
    /// Core instances the component creates.
    pub core_instances: usize,
}

/// A limit a component's shape passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeExcess {
    /// Which limit, in words.
    pub what: &'static str,
    /// What the component has.
    pub found: u64,
    /// The limit.
    pub limit: u64,
}

impl ModuleShape {
    /// Most of each thing a component may declare. The defaults leave at least twice the
    /// room the largest modules the SDKs make need (measured: componentize-py's CPython
    /// has a 427 KB function, 781 nested blocks, 508 globals, 14 core modules instantiated
    /// once each; componentize-js 12,664 functions; none more than 271 locals), and stay
    /// far below the shapes that make Cranelift run for minutes or use gigabytes (250,000
    /// nested loops, 50,000 locals).
    pub const LIMITS: ModuleShape = ModuleShape {
        function_body_bytes: 2 * 1024 * 1024,
        locals_per_function: 10_000,
        nesting_depth: 4_000,
        functions_per_module: 100_000,
        types_per_module: 10_000,
        globals_per_module: 10_000,
        tables_per_module: 8,
        memories_per_module: 4,
        core_modules: 64,
        core_instances: 64,
    };

    /// Reads the shape of a component (or core module) without compiling it. Fails with
    /// wasmparser's message when the bytes cannot be parsed.
    pub fn of(bytes: &[u8]) -> Result<ModuleShape, String> {
        let mut shape = ModuleShape::default();
        // Counts of the core module being read; components nest them, so a stack.
        let mut modules: Vec<ModuleCounts> = Vec::new();
        for payload in Parser::new(0).parse_all(bytes) {
            match payload.map_err(|e| e.to_string())? {
                Payload::Version { encoding, .. } => {
                    if encoding == wasmtime::wasmparser::Encoding::Module {
                        shape.core_modules += 1;
                    }
                    modules.push(ModuleCounts::default());
                }
                Payload::End(_) => {
                    if let Some(counts) = modules.pop() {
                        shape.take_module(&counts);
                    }
                }
                Payload::TypeSection(types) => top(&mut modules).types += types.count() as usize,
                Payload::FunctionSection(functions) => {
                    top(&mut modules).functions += functions.count() as usize;
                }
                Payload::GlobalSection(globals) => {
                    top(&mut modules).globals += globals.count() as usize;
                }
                Payload::TableSection(tables) => {
                    top(&mut modules).tables += tables.count() as usize;
                }
                Payload::MemorySection(memories) => {
                    top(&mut modules).memories += memories.count() as usize;
                }
                Payload::InstanceSection(instances) => {
                    // Bundles of exports are instances in name only; count instantiations.
                    for instance in instances {
                        if let wasmtime::wasmparser::Instance::Instantiate { .. } =
                            instance.map_err(|e| e.to_string())?
                        {
                            shape.core_instances += 1;
                        }
                    }
                }
                Payload::CodeSectionEntry(body) => shape.take_function(&body)?,
                _ => {}
            }
        }
        Ok(shape)
    }

    fn take_module(&mut self, counts: &ModuleCounts) {
        self.functions_per_module = self.functions_per_module.max(counts.functions);
        self.types_per_module = self.types_per_module.max(counts.types);
        self.globals_per_module = self.globals_per_module.max(counts.globals);
        self.tables_per_module = self.tables_per_module.max(counts.tables);
        self.memories_per_module = self.memories_per_module.max(counts.memories);
    }

    fn take_function(
        &mut self,
        body: &wasmtime::wasmparser::FunctionBody<'_>,
    ) -> Result<(), String> {
        let error = |e: wasmtime::wasmparser::BinaryReaderError| e.to_string();
        self.function_body_bytes = self.function_body_bytes.max(body.range().len());
        let mut locals = 0u64;
        for group in body.get_locals_reader().map_err(error)? {
            locals = locals.saturating_add(u64::from(group.map_err(error)?.0));
        }
        self.locals_per_function = self.locals_per_function.max(locals);
        let mut operators = body.get_operators_reader().map_err(error)?;
        // The function's own body is the outermost block.
        let mut depth = 0usize;
        while !operators.eof() {
            match operators.read().map_err(error)? {
                Operator::Block { .. }
                | Operator::Loop { .. }
                | Operator::If { .. }
                | Operator::TryTable { .. } => {
                    depth += 1;
                    self.nesting_depth = self.nesting_depth.max(depth);
                }
                Operator::End => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        Ok(())
    }

    /// The first limit this shape passes, if any.
    pub fn excess(&self, limits: &ModuleShape) -> Option<ShapeExcess> {
        let checks: [(&'static str, u64, u64); 10] = [
            (
                "bytes of one function body",
                self.function_body_bytes as u64,
                limits.function_body_bytes as u64,
            ),
            (
                "locals of one function",
                self.locals_per_function,
                limits.locals_per_function,
            ),
            (
                "nested blocks, loops and ifs in one function",
                self.nesting_depth as u64,
                limits.nesting_depth as u64,
            ),
            (
                "functions of one core module",
                self.functions_per_module as u64,
                limits.functions_per_module as u64,
            ),
            (
                "types of one core module",
                self.types_per_module as u64,
                limits.types_per_module as u64,
            ),
            (
                "globals of one core module",
                self.globals_per_module as u64,
                limits.globals_per_module as u64,
            ),
            (
                "tables of one core module",
                self.tables_per_module as u64,
                limits.tables_per_module as u64,
            ),
            (
                "memories of one core module",
                self.memories_per_module as u64,
                limits.memories_per_module as u64,
            ),
            (
                "core modules in the component",
                self.core_modules as u64,
                limits.core_modules as u64,
            ),
            (
                "core instances the component creates",
                self.core_instances as u64,
                limits.core_instances as u64,
            ),
        ];
        checks
            .into_iter()
            .find(|(_, found, limit)| found > limit)
            .map(|(what, found, limit)| ShapeExcess { what, found, limit })
    }
}

/// What one core module declares.
#[derive(Default)]
struct ModuleCounts {
    functions: usize,
    types: usize,
    globals: usize,
    tables: usize,
    memories: usize,
}

fn top(modules: &mut Vec<ModuleCounts>) -> &mut ModuleCounts {
    if modules.is_empty() {
        modules.push(ModuleCounts::default());
    }
    modules.last_mut().expect("pushed above")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(wat: &str) -> Vec<u8> {
        wat::parse_str(wat).unwrap()
    }

    #[test]
    fn nesting_locals_and_counts_are_read() {
        let bytes = core(
            r#"(module
                (type (func))
                (global i32 (i32.const 0))
                (global i32 (i32.const 1))
                (table 1 funcref)
                (memory 1)
                (func (local i64 i64 i64)
                  (block (loop (if (i32.const 0) (then (nop))))))
                (func))"#,
        );
        let shape = ModuleShape::of(&bytes).unwrap();
        assert_eq!(shape.nesting_depth, 3);
        assert_eq!(shape.locals_per_function, 3);
        assert_eq!(shape.functions_per_module, 2);
        assert_eq!(shape.globals_per_module, 2);
        assert_eq!(shape.tables_per_module, 1);
        assert_eq!(shape.memories_per_module, 1);
        assert_eq!(shape.core_modules, 1);
        assert_eq!(shape.excess(&ModuleShape::LIMITS), None);
    }

    #[test]
    fn a_deeply_nested_function_is_named() {
        let depth = 5_000;
        let wat = format!(
            "(module (func {} {}))",
            "(loop ".repeat(depth),
            ")".repeat(depth)
        );
        let shape = ModuleShape::of(&core(&wat)).unwrap();
        assert_eq!(shape.nesting_depth, depth);
        let excess = shape.excess(&ModuleShape::LIMITS).unwrap();
        assert_eq!(excess.what, "nested blocks, loops and ifs in one function");
        assert_eq!((excess.found, excess.limit), (5_000, 4_000));
    }

    #[test]
    fn many_locals_are_named() {
        let wat = "(module (func (local i64) (local i64)))"
            .replace("(local i64) (local i64)", &"(local i64) ".repeat(20_000));
        let excess = ModuleShape::of(&core(&wat))
            .unwrap()
            .excess(&ModuleShape::LIMITS)
            .unwrap();
        assert_eq!(excess.what, "locals of one function");
        assert_eq!(excess.found, 20_000);
    }

    #[test]
    fn core_modules_inside_a_component_are_counted_each() {
        let bytes = wat::parse_str(
            r#"(component
                (core module $a (func) (func) (func))
                (core module $b (global i32 (i32.const 0)) (func))
                (core instance (instantiate $a))
                (core instance (instantiate $a))
                (core instance (instantiate $b)))"#,
        )
        .unwrap();
        let shape = ModuleShape::of(&bytes).unwrap();
        assert_eq!(shape.core_modules, 2);
        assert_eq!(shape.core_instances, 3);
        assert_eq!(shape.functions_per_module, 3);
        assert_eq!(shape.globals_per_module, 1);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(ModuleShape::of(b"\0asm\x0d\0\x01\0\xff\xff").is_err());
    }
}
