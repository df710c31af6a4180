//! `ryvos-sandbox`: the inner layer of the sandbox. bubblewrap starts it inside the namespaces;
//! it confines itself with Landlock and a system-call filter and becomes the command. Not for
//! people to run.

fn main() {
    let code = ryvos::sandbox_inner_main(std::env::args_os().skip(1));
    std::process::exit(code);
}
