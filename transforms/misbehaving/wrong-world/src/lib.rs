//! A component exporting `example:greeter/greet`: valid Wasm, not a transform.

wit_bindgen::generate!({
    path: "wit/greeter.wit",
    world: "greeter",
});

/// The fixture's export, on Wasm targets.
pub struct Greeter;

impl exports::example::greeter::greet::Guest for Greeter {
    fn hello(name: String) -> String {
        format!("Hello, {name}!")
    }
}

#[cfg(target_arch = "wasm32")]
export!(Greeter);
