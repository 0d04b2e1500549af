//! `listeners:` and their certificates: names, addresses, protocols, and the TLS sets loaded for `https` and `http3`.

use super::*;

impl Compiler<'_> {
    pub(super) fn listeners(&mut self, listeners: &[Spanned<ListenerFile>]) -> Vec<ListenerSpec> {
        let mut specs = Vec::new();
        let mut names: HashMap<&str, ()> = HashMap::new();
        let mut addresses: HashMap<(SocketAddr, bool), &str> = HashMap::new();
        for (i, listener) in listeners.iter().enumerate() {
            let l = &listener.value;
            let path = |key: &str| format!("listeners[{i}].{key}");
            if l.name.value.is_empty() {
                self.errors
                    .at(&l.name.referenced, path("name"), "must not be empty");
            } else if names.insert(l.name.value.as_str(), ()).is_some() {
                self.errors.at(
                    &l.name.referenced,
                    path("name"),
                    format!("listener name \"{}\" is used twice", l.name.value),
                );
            }
            let protocol_at = l
                .protocol
                .as_ref()
                .map_or(listener.referenced, |p| p.referenced);
            let kind = match l.protocol.as_ref().map(|p| p.value.as_str()) {
                None | Some("http") => Some(Kind::Http),
                Some("https") if cfg!(feature = "tls") => Some(Kind::Https),
                Some("http3") if cfg!(feature = "http3") => Some(Kind::Http3),
                #[cfg(not(all(feature = "tls", feature = "http3")))]
                Some(protocol @ ("https" | "http3")) => {
                    let (what, feature) = match protocol {
                        "https" => ("HTTPS", "tls"),
                        _ => ("HTTP/3", "http3"),
                    };
                    self.not_built(&protocol_at, path("protocol"), what, feature);
                    None
                }
                Some(other) => {
                    let hint = did_you_mean(other, ["http", "https", "http3"]);
                    self.errors.at(
                        &protocol_at,
                        path("protocol"),
                        format!(
                            "unknown protocol \"{other}\"{hint}; expected http, https or http3"
                        ),
                    );
                    None
                }
            };
            let protocol = match (kind, &l.tls) {
                (Some(Kind::Http), Some(tls)) => {
                    self.errors.at(
                        &tls.referenced,
                        path("tls"),
                        "tls applies only to protocol https or http3",
                    );
                    None
                }
                (Some(Kind::Http), None) => Some(ListenerProtocol::Http),
                (Some(kind), None) => {
                    self.errors.at(
                        &protocol_at,
                        path("tls"),
                        format!("protocol {} needs tls.certificates", kind.name()),
                    );
                    None
                }
                (Some(kind), Some(tls)) => self.secure(&path("tls.certificates"), tls, kind),
                (None, _) => None,
            };
            match l.address.value.parse::<SocketAddr>() {
                Ok(address) => {
                    // Port 0 asks the OS for a free port: never a clash. TCP
                    // (http, https) and UDP (http3) may share a port.
                    let udp = matches!(kind, Some(Kind::Http3));
                    let clash = (address.port() != 0)
                        .then(|| addresses.insert((address, udp), l.name.value.as_str()))
                        .flatten();
                    if let Some(other) = clash {
                        self.errors.at(
                            &l.address.referenced,
                            path("address"),
                            format!("address {address} is already used by listener \"{other}\""),
                        );
                    }
                    if matches!(kind, Some(Kind::Https)) && self.https_port.is_none() {
                        self.https_port = Some(address.port());
                    }
                    if let Some(protocol) = protocol {
                        specs.push(ListenerSpec {
                            name: l.name.value.as_str().into(),
                            address,
                            protocol,
                        });
                    }
                }
                Err(_) => self.errors.at(
                    &l.address.referenced,
                    path("address"),
                    format!("invalid address \"{}\": expected IP:PORT, e.g. 127.0.0.1:8080 or [::1]:8080", l.address.value),
                ),
            }
        }
        specs
    }

    /// An `https` or `http3` listener's protocol, its certificates loaded.
    #[cfg(feature = "tls")]
    fn secure(
        &mut self,
        path: &str,
        tls: &Spanned<ListenerTlsFile>,
        kind: Kind,
    ) -> Option<ListenerProtocol> {
        let certificates = self.certificates(path, tls, matches!(kind, Kind::Http3))?;
        match kind {
            Kind::Https => Some(ListenerProtocol::Https(certificates)),
            #[cfg(feature = "http3")]
            Kind::Http3 => Some(ListenerProtocol::Http3(certificates)),
            // Refused with its protocol above.
            _ => None,
        }
    }

    /// Without TLS no listener is secure: its protocol was refused above.
    #[cfg(not(feature = "tls"))]
    fn secure(
        &mut self,
        _: &str,
        _: &Spanned<ListenerTlsFile>,
        _: Kind,
    ) -> Option<ListenerProtocol> {
        None
    }

    /// Loads a listener's certificates, or reuses the set loaded for the same
    /// files. No set is shared by two `http3` listeners (`quic`): a reload
    /// pours an `http3` listener's new certificates into the set its QUIC
    /// endpoint was opened with, and another `http3` listener reading that
    /// set would serve them too. (`https` listeners take new sets.)
    #[cfg(feature = "tls")]
    pub(super) fn certificates(
        &mut self,
        path: &str,
        tls: &Spanned<ListenerTlsFile>,
        quic: bool,
    ) -> Option<TlsCertificates> {
        if tls.value.certificates.is_empty() {
            self.errors.at(
                &tls.referenced,
                path,
                "needs at least one { cert, key } pair",
            );
            return None;
        }
        let files: Vec<CertificateFiles> = tls
            .value
            .certificates
            .iter()
            .map(|c| CertificateFiles {
                cert: self.base_dir.join(&c.value.cert.value),
                key: self.base_dir.join(&c.value.key.value),
            })
            .collect();
        let unknown = match tls.value.unknown_sni.as_ref() {
            // Refused where the first certificate is one of several sites';
            // a listener with one certificate serves it to every name.
            None if files.len() > 1 => UnknownServerName::Refuse,
            None => UnknownServerName::ServeDefault,
            Some(value) => match value.value.as_str() {
                "refuse" => UnknownServerName::Refuse,
                "default" => UnknownServerName::ServeDefault,
                other => {
                    let hint = did_you_mean(other, ["refuse", "default"]);
                    self.errors.at(
                        &value.referenced,
                        path.replace("tls.certificates", "tls.unknown_sni"),
                        format!(
                            "unknown unknown_sni \"{other}\"{hint}; expected refuse or default"
                        ),
                    );
                    return None;
                }
            },
        };
        let mut seen = false;
        for (loaded_files, loaded, taken_by_quic) in &mut self.certificates {
            if loaded_files.0 == files {
                seen = true;
                if loaded_files.1 == unknown && !(quic && *taken_by_quic) {
                    *taken_by_quic |= quic;
                    return Some(loaded.clone());
                }
            }
        }
        let inputs = self.inputs;
        match TlsCertificates::load_with(&files, &|path| inputs.read(path)) {
            Ok(loaded) => {
                loaded.set_unknown_server_name(unknown);
                if !seen {
                    self.warnings.extend(loaded.warnings());
                }
                self.certificates
                    .push(((files, unknown), loaded.clone(), quic));
                Some(loaded)
            }
            Err(error) => {
                // Point at the pair the error is about.
                let text = error.to_string();
                let (i, pair) = tls
                    .value
                    .certificates
                    .iter()
                    .enumerate()
                    .find(|(_, c)| {
                        let cert = self.base_dir.join(&c.value.cert.value);
                        let key = self.base_dir.join(&c.value.key.value);
                        text.contains(&cert.display().to_string())
                            || text.contains(&key.display().to_string())
                    })
                    .unwrap_or((0, &tls.value.certificates[0]));
                self.errors
                    .at(&pair.referenced, format!("{path}[{i}]"), text);
                None
            }
        }
    }
}
