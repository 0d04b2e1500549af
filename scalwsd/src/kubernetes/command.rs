//! `scalwsd translate`: manifests in, the configuration on stdout, the status
//! on stderr, certificates written under `--certs-dir`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::{KubernetesArgs, TranslateArgs};
use crate::config::{Carried, Inputs};

use super::translate::{Options, Translation, translate};
use super::{Resources, check, manifests};

/// Exit status for unreadable manifests, or nothing to serve.
const EXIT_INPUT: u8 = 2;

impl KubernetesArgs {
    /// The translation options these arguments give; certificates are said
    /// to be under `certs_dir`.
    pub fn options(&self, certs_dir: String) -> Options {
        Options {
            bind: self.bind,
            listen: self.listen.iter().copied().collect(),
            ingress_class: self.class.clone(),
            gateway_class: self.gateway_class.clone(),
            controller_name: self.controller_name.clone(),
            certs_dir,
            publish: Vec::new(),
        }
    }
}

/// Runs `scalwsd translate`; returns its exit status.
pub fn run(args: &TranslateArgs) -> ExitCode {
    let mut resources = Resources::default();
    match manifests::read_paths(&args.paths, &mut resources) {
        Ok(skipped) => {
            for line in skipped.0 {
                eprintln!("note: {line}");
            }
        }
        Err(errors) => {
            for error in &errors {
                eprintln!("{error}");
            }
            eprintln!(
                "scalwsd translate: {} error(s) in the manifests; nothing was printed",
                errors.len()
            );
            return ExitCode::from(EXIT_INPUT);
        }
    }
    let certs_dir = std::path::absolute(&args.certs_dir).unwrap_or_else(|_| args.certs_dir.clone());
    let options = args.kubernetes.options(certs_dir.display().to_string());
    let mut translation = translate(&resources, &options);
    if translation.document.listeners.is_empty() {
        eprint!("{}", translation.status);
        eprintln!(
            "scalwsd translate: nothing to serve: no valid listener of a Gateway of controller {} and no Ingress of class {}",
            options.controller_name, options.ingress_class
        );
        return ExitCode::from(EXIT_INPUT);
    }
    // Checked as `scalwsd --check` will (the certificates from memory), so
    // what is printed serves; nothing is written unless it does.
    let inputs = Inputs {
        files: translation
            .certificates
            .iter()
            .flat_map(|c| {
                [
                    (c.files.cert.clone().into(), c.cert.clone()),
                    (c.files.key.clone().into(), c.key.clone()),
                ]
            })
            .collect(),
        allow_no_listeners: false,
    };
    let checked = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(async {
            check::load(
                &mut translation,
                Path::new("."),
                &Carried::default(),
                &inputs,
            )
        }),
        Err(error) => {
            eprintln!("scalwsd translate: cannot start the runtime: {error}");
            return ExitCode::from(EXIT_INPUT);
        }
    };
    if checked.is_ok()
        && let Err(error) = write_certificates(&translation)
    {
        eprintln!("scalwsd translate: {error}");
        return ExitCode::from(EXIT_INPUT);
    }
    match checked {
        Ok((_, yaml)) => {
            eprint!("{}", translation.status);
            let mut out = std::io::stdout().lock();
            if out
                .write_all(yaml.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return ExitCode::from(EXIT_INPUT);
            }
            ExitCode::SUCCESS
        }
        Err(errors) => {
            eprint!("{}", translation.status);
            eprintln!("{errors}");
            eprintln!(
                "scalwsd translate: the translated configuration is not valid; nothing was printed"
            );
            ExitCode::from(EXIT_INPUT)
        }
    }
}

/// Writes each certificate and key where the document says (keys readable by the owner only).
fn write_certificates(translation: &Translation) -> Result<(), String> {
    for certificate in &translation.certificates {
        for (path, bytes, private) in [
            (&certificate.files.cert, &certificate.cert, false),
            (&certificate.files.key, &certificate.key, true),
        ] {
            let path = Path::new(path);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            write_file(path, bytes, private)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8], private: bool) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    if private {
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    if private {
        // `mode` applies to a new file only; a key written before keeps no wider access.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(bytes)
}
