//! Hostile components, generated: the shapes a tenant could upload to make the host's
//! compiler or instantiation spend without bound (nested loops, locals, globals, tables
//! beyond the instance's memory cap).

use wasm_encoder::{
    BlockType, CodeSection, Component, ConstExpr, Function, FunctionSection, GlobalSection,
    GlobalType, InstanceSection, Module, ModuleArg, ModuleSection, RefType, TableSection,
    TableType, TypeSection, ValType,
};

/// A component whose one core module has one function of `depth` nested loops.
pub fn nested_loops(depth: usize) -> Vec<u8> {
    let mut body = Function::new([]);
    for _ in 0..depth {
        body.instructions().loop_(BlockType::Empty);
    }
    for _ in 0..depth {
        body.instructions().end();
    }
    body.instructions().end();
    component_of(&module_with_function(body))
}

/// A component whose one core module has one function with `count` `i64` locals, all
/// of them read.
pub fn many_locals(count: u32) -> Vec<u8> {
    let mut body = Function::new([(count, ValType::I64)]);
    for local in 0..count {
        body.instructions().local_get(local).drop();
    }
    body.instructions().end();
    component_of(&module_with_function(body))
}

/// A component whose one core module defines `count` globals.
pub fn many_globals(count: u32) -> Vec<u8> {
    let mut globals = GlobalSection::new();
    for i in 0..count {
        globals.global(
            GlobalType {
                val_type: ValType::I64,
                mutable: true,
                shared: false,
            },
            &ConstExpr::i64_const(i64::from(i)),
        );
    }
    let mut module = Module::new();
    module.section(&globals);
    component_of(&module)
}

/// A core module of `tables` funcref tables of `elements` elements each.
pub fn tables_module(tables: u32, elements: u64) -> Module {
    let mut section = TableSection::new();
    for _ in 0..tables {
        section.table(TableType {
            element_type: RefType::FUNCREF,
            table64: false,
            minimum: elements,
            maximum: None,
            shared: false,
        });
    }
    let mut module = Module::new();
    module.section(&section);
    module
}

/// `component` with `module` added and instantiated `instances` times when the
/// component is: each instance of the component then holds that much more.
pub fn with_instances_of(component: &[u8], module: &Module, instances: u32) -> Vec<u8> {
    let index = core_modules(component);
    let mut added = Component::new();
    added.section(&ModuleSection(module));
    let mut section = InstanceSection::new();
    for _ in 0..instances {
        section.instantiate(index, Vec::<(&str, ModuleArg)>::new());
    }
    added.section(&section);
    let added = added.finish();
    // Sections may come in any order and repeat: the new ones follow the old.
    let mut bytes = component.to_vec();
    bytes.extend_from_slice(&added[8..]);
    bytes
}

/// `component` with a custom section added: other bytes, the same code, so a host
/// that remembers refusals by digest must compile it again.
pub fn variant(component: &[u8], payload: &str) -> Vec<u8> {
    let mut added = Component::new();
    added.section(&wasm_encoder::CustomSection {
        name: "sluice-test-variant".into(),
        data: payload.as_bytes().into(),
    });
    let added = added.finish();
    let mut bytes = component.to_vec();
    bytes.extend_from_slice(&added[8..]);
    bytes
}

fn module_with_function(body: Function) -> Module {
    let mut types = TypeSection::new();
    types.ty().function([], []);
    let mut functions = FunctionSection::new();
    functions.function(0);
    let mut code = CodeSection::new();
    code.function(&body);
    let mut module = Module::new();
    module.section(&types).section(&functions).section(&code);
    module
}

fn component_of(module: &Module) -> Vec<u8> {
    let mut component = Component::new();
    component.section(&ModuleSection(module));
    component.finish()
}

/// How many core modules a component declares at its top level (their indexes come
/// first in its core module index space).
fn core_modules(component: &[u8]) -> u32 {
    const CORE_MODULE_SECTION: u8 = 1;
    let mut at = 8;
    let mut count = 0;
    while at < component.len() {
        let id = component[at];
        at += 1;
        let mut size = 0usize;
        let mut shift = 0;
        loop {
            let byte = component[at];
            at += 1;
            size |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        if id == CORE_MODULE_SECTION {
            count += 1;
        }
        at += size;
    }
    count
}
