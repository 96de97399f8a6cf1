//! Devices a tensor can live on.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// The kind of device. Only the host CPU is implemented; the numbers are DLPack's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceType {
    /// The host CPU (DLPack `kDLCPU` = 1).
    Cpu,
}

impl DeviceType {
    /// The DLPack device type code.
    pub fn code(self) -> i32 {
        match self {
            DeviceType::Cpu => 1,
        }
    }

    /// The device type of a DLPack code.
    pub fn from_code(code: i32) -> Result<Self> {
        match code {
            1 => Ok(DeviceType::Cpu),
            other => Err(Error::value(format!("unsupported device type code {other}: only cpu (1) is available"))),
        }
    }

    /// The name used in text form (`cpu`).
    pub fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
        }
    }
}

/// A device: a type and an index among devices of that type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    /// The kind of device.
    pub device_type: DeviceType,
    /// The index among devices of that kind.
    pub device_id: i32,
}

impl Device {
    /// CPU number `id`.
    pub const fn cpu(id: i32) -> Self {
        Device { device_type: DeviceType::Cpu, device_id: id }
    }
}

impl Default for Device {
    fn default() -> Self {
        Device::cpu(0)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.device_type.name(), self.device_id)
    }
}

impl FromStr for Device {
    type Err = Error;

    /// Parses `cpu` or `cpu:N`.
    fn from_str(s: &str) -> Result<Self> {
        let (kind, id) = s.split_once(':').unwrap_or((s, "0"));
        let id: i32 = id.parse().map_err(|_| Error::value(format!("bad device id in {s:?}")))?;
        // As `rx.cpu(-1)` is refused (attack other/01): no spelling names a device that
        // cannot exist.
        if id < 0 {
            return Err(Error::value(format!("bad device id in {s:?}: a device id is not negative")));
        }
        match kind {
            "cpu" => Ok(Device::cpu(id)),
            _ => Err(Error::value(format!("unknown device {s:?}: expected cpu or cpu:N"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        assert_eq!("cpu:2".parse::<Device>().unwrap(), Device::cpu(2));
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::cpu(0));
        assert_eq!(
            "cpu:-1".parse::<Device>().expect_err("an error").to_string(),
            "bad device id in \"cpu:-1\": a device id is not negative"
        );
        assert_eq!(Device::cpu(1).to_string(), "cpu:1");
        assert_eq!(
            format!("{:?}", "gpu:0".parse::<Device>().expect_err("an error")),
            r#"Value("unknown device \"gpu:0\": expected cpu or cpu:N")"#
        );
        assert_eq!(
            format!("{:?}", "cpu:x".parse::<Device>().expect_err("an error")),
            r#"Value("bad device id in \"cpu:x\"")"#
        );
        assert_eq!(
            format!("{:?}", DeviceType::from_code(2).expect_err("an error")),
            r#"Value("unsupported device type code 2: only cpu (1) is available")"#
        );
        assert_eq!(DeviceType::from_code(1).unwrap().code(), 1);
    }
}
