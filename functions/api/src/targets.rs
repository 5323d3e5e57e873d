//! `GET /v1/targets`: the devices and packages a design may name as its `target`, with what each
//! device holds. The list is the validator's own device tables (`openqq_fpga::device` for iCE40,
//! `openqq_fpga::ecp5::device` for ECP5), so the UI offers exactly what validation accepts. It is
//! the same for every tenant and needs no token.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::sync::LazyLock;

/// One device as the list shows it.
#[derive(Debug, Serialize)]
pub struct DeviceView {
    /// The name a target's `device` takes (`hx8k`, `LFE5U-25F`).
    pub device: &'static str,
    /// The device's family (`iCE40`, `ECP5`).
    pub family: &'static str,
    /// The constraints format the family reads (`pcf`, `lpf`).
    pub constraints: &'static str,
    /// The package nextpnr picks when none is given.
    pub default_package: &'static str,
    /// Every package a target's `package` may take with this device.
    pub packages: Vec<&'static str>,
    /// What the device holds, as the report's utilisation names it.
    pub capacity: Vec<Capacity>,
}

#[derive(Debug, Serialize)]
pub struct Capacity {
    pub resource: &'static str,
    pub available: u32,
}

/// Every device the validator knows, in its tables' order: iCE40, then ECP5.
pub fn devices() -> Vec<DeviceView> {
    let capacity = |caps: Vec<(&'static str, u32)>| -> Vec<Capacity> {
        caps.into_iter().map(|(resource, available)| Capacity { resource, available }).collect()
    };
    use openqq_fpga::Family;
    let ice40 = openqq_fpga::device::devices().iter().map(|d| DeviceView {
        device: d.name,
        family: Family::Ice40(d).name(),
        constraints: Family::Ice40(d).constraint_format(),
        default_package: d.default_package,
        packages: d.packages.iter().map(|p| p.name).collect(),
        capacity: capacity(d.capacities()),
    });
    let ecp5 = openqq_fpga::ecp5::device::devices().iter().map(|d| DeviceView {
        device: d.name,
        family: Family::Ecp5(d).name(),
        constraints: Family::Ecp5(d).constraint_format(),
        default_package: d.default_package(),
        packages: d.packages.iter().map(|p| p.name).collect(),
        capacity: capacity(d.capacities()),
    });
    ice40.chain(ecp5).collect()
}

/// The answer's body, built once: it changes only with the binary.
static BODY: LazyLock<String> = LazyLock::new(|| {
    serde_json::to_string(&serde_json::json!({ "devices": devices() })).expect("the device list serialises")
});

pub async fn list() -> Response {
    let mut resp = ([(header::CONTENT_TYPE, "application/json")], BODY.as_str()).into_response();
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_offers_hx8k_in_ct256_with_its_logic_cells_and_every_devices_default_package() {
        let devices = devices();
        let hx8k = devices.iter().find(|d| d.device == "hx8k").expect("hx8k is listed");
        assert!(hx8k.packages.contains(&"ct256"));
        let lcs = hx8k.capacity.iter().find(|c| c.resource == "ICESTORM_LC").unwrap();
        assert_eq!(lcs.available, 7680);
        for d in &devices {
            assert!(d.packages.contains(&d.default_package), "{}: its default package is listed", d.device);
        }
    }

    #[test]
    fn the_list_offers_every_ecp5_part_with_lpf_constraints_and_nextpnrs_capacities() {
        let devices = devices();
        let ecp5: Vec<&DeviceView> = devices.iter().filter(|d| d.family == "ECP5").collect();
        assert_eq!(ecp5.len(), 10);
        assert!(ecp5.iter().all(|d| d.constraints == "lpf"));
        let d = ecp5.iter().find(|d| d.device == "LFE5U-25F").expect("the 25F is listed");
        assert!(d.packages.contains(&"CABGA256") && d.packages.contains(&"TQFP144"));
        let combs = d.capacity.iter().find(|c| c.resource == "TRELLIS_COMB").unwrap();
        assert_eq!(combs.available, 24288);
    }
}
