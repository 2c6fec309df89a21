//! On Windows, builds the exit sentinel (`windows/exit_sentinel.c`, see
//! `src/exit_guard.rs`) into a DLL the command carries, with the C
//! compiler the target uses (MinGW-w64's `gcc` or MSVC's `cl`). Without a
//! C compiler the command is built without it (a warning says so), and a
//! provider's `exit` then ends the command with the provider's own status.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=windows/exit_sentinel.c");
    println!("cargo::rustc-check-cfg=cfg(guardhost_exit_sentinel)");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("windows") {
        return;
    }
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let source = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"))
        .join("windows")
        .join("exit_sentinel.c");
    let dll = out_dir.join("exit_sentinel.dll");
    let compiler = cc::Build::new().cargo_warnings(false).get_compiler();
    let mut command = compiler.to_command();
    command.current_dir(&out_dir);
    if compiler.is_like_msvc() {
        command.arg("/nologo").arg("/LD").arg(&source).arg(format!("/Fe{}", dll.display()));
    } else {
        command.arg("-shared").arg("-O2").arg("-o").arg(&dll).arg(&source);
    }
    match command.status() {
        Ok(status) if status.success() => println!("cargo::rustc-cfg=guardhost_exit_sentinel"),
        Ok(status) => println!(
            "cargo::warning=the exit sentinel did not build ({status}): a provider's exit will end guardhost with its own status"
        ),
        Err(error) => println!(
            "cargo::warning=no C compiler for the exit sentinel ({error}): a provider's exit will end guardhost with its own status"
        ),
    }
}
