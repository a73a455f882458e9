//! The shared library's SONAME, for installed copies only: `cargo xtask install` builds the
//! library with `KARU_FFI_SONAME=libkaru.so.0`, and programs linked against the installed
//! `libkaru.so` then load `libkaru.so.0`. Other builds (tests, `-L target/release -lkaru`) name
//! none, so a program linked in the build directory loads the `libkaru.so` it was linked with.

fn main() {
    println!("cargo::rerun-if-env-changed=KARU_FFI_SONAME");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if let Ok(soname) = std::env::var("KARU_FFI_SONAME")
        && linux
        && !soname.is_empty()
    {
        println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    }
}
