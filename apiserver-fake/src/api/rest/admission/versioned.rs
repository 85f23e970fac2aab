//! `admission.VersionedAttributes` (`staging/src/k8s.io/apiserver/pkg/admission/conversion.go`,
//! `ConvertToGVK` in `.../webhook/generic/conversion.go`): the request's object and old object at the
//! version a webhook is invoked with, when `matchPolicy: Equivalent` matched it through another version
//! than the request's.
//!
//! How objects convert is how the fake serves them:
//! * a custom resource of a CRD with several versions converts as its store does (docs/decisions.md
//!   §22, [`crate::api::rest::conversion::Converter`]): `strategy: None` relabels, `Webhook` posts a
//!   `ConversionReview` to the conversion webhook, with its texts on failure;
//! * built-in resources, and the objects of subresources whose kind is fixed (an `autoscaling/v1`
//!   `Scale`), are relabelled: the fake serves a built-in resource alike in every version it serves
//!   it in (upstream converts through the internal version, which for the equivalent versions the fake
//!   serves changes only `apiVersion` but for the fields a version lacks).
//!
//! Errors are the converter's text; the dispatchers wrap them as upstream's do.

use std::sync::Arc;

use serde_json::Value;

use super::Attributes;
use crate::api::rest::RestRequest;
use crate::api::rest::conversion::Converter;
use crate::store::{ObjectKey, Store};

/// Converts the objects of one request between the versions of its resource (`ObjectConvertor`). The
/// CRD of a custom resource is read on the first conversion to another version, not before: most
/// requests never convert.
pub(crate) struct ObjectConvertor {
    store: Arc<dyn Store>,
    addresses: Arc<super::ServiceAddresses>,
    /// The CRD's `<plural>.<group>` when the objects are custom resources (not a `Scale`).
    crd: Option<String>,
    /// The CRD's converter once read (`None` inside: nothing to convert, relabel).
    converter: Option<Option<Converter>>,
}

impl ObjectConvertor {
    /// The convertor of `req`'s objects as `attributes` describe them.
    pub(crate) fn new(req: &RestRequest<'_>, attributes: &Attributes) -> Self {
        let custom = req.resource.custom && attributes.kind_api_version.is_none();
        Self {
            store: req.ctx.store.clone(),
            addresses: req.ctx.webhook_service_addresses.clone(),
            crd: custom.then(|| format!("{}.{}", attributes.resource, attributes.group)),
            converter: None,
        }
    }

    /// A convertor that only relabels (for tests, and for resources without conversion).
    #[cfg(test)]
    pub(crate) fn relabelling() -> Self {
        Self {
            store: Arc::new(crate::store::MemoryStore::new()),
            addresses: Arc::default(),
            crd: None,
            converter: None,
        }
    }

    async fn converter(&mut self) -> Option<&Converter> {
        if self.converter.is_none() {
            let converter = match &self.crd {
                None => None,
                Some(name) => self
                    .store
                    .get(
                        &crate::api::rest::lifecycle::custom_resource_definitions(),
                        &ObjectKey::cluster(name),
                    )
                    .await
                    .ok()
                    .and_then(|crd| Converter::for_crd(&crd, self.store.clone(), self.addresses.clone())),
            };
            self.converter = Some(converter);
        }
        self.converter.as_ref().and_then(Option::as_ref)
    }

    /// `ConvertToGVK`: `object`, at `from`, at version `to` of the request's resource; an object
    /// already at `to` is returned as it is (not even relabelled: the review labels what it sends, and
    /// relabelling twice would move the keys `present` does not order).
    pub(crate) async fn convert(
        &mut self,
        attributes: &Attributes,
        object: &Value,
        from: &str,
        to: &str,
    ) -> Result<Value, String> {
        let present = |object: Value, version: &str| {
            crate::api::rest::object::present(object, &attributes.kind_api_version(version), &attributes.kind)
        };
        if from == to {
            return Ok(object.clone());
        }
        match self.converter().await {
            // The webhook's answer is checked to be at `to`, with the kind.
            Some(converter) => converter.convert(present(object.clone(), from), to).await,
            None => Ok(present(object.clone(), to)),
        }
    }
}

/// The objects of a request at the version a webhook is invoked with (`VersionedAttributes`).
#[derive(Debug, Clone)]
pub(crate) struct Versioned {
    /// The version of `object` and `old_object`.
    pub version: String,
    /// The new object at `version` (none on delete).
    pub object: Option<Value>,
    /// The old object at `version` (none on create).
    pub old_object: Option<Value>,
    /// Whether a mutating webhook changed `object` since it was converted (it must then be converted
    /// back to the request's version).
    pub dirty: bool,
}

impl Versioned {
    /// `NewVersionedAttributes`: `attributes`' objects at `version` (the old object first).
    pub(crate) async fn new(
        convertor: &mut ObjectConvertor,
        attributes: &Attributes,
        version: &str,
    ) -> Result<Self, String> {
        let from = attributes.version.as_str();
        let old_object = match &attributes.old_object {
            Some(old) => Some(convertor.convert(attributes, old, from, version).await?),
            None => None,
        };
        let object = match &attributes.object {
            Some(object) => Some(convertor.convert(attributes, object, from, version).await?),
            None => None,
        };
        Ok(Self {
            version: version.to_owned(),
            object,
            old_object,
            dirty: false,
        })
    }

    /// `ConvertVersionedAttributes`: to `version`, the old object from the request's, the object from
    /// this one's (written back to `attributes` first when a webhook changed it).
    pub(crate) async fn convert_to(
        &mut self,
        convertor: &mut ObjectConvertor,
        attributes: &mut Attributes,
        version: &str,
    ) -> Result<(), String> {
        if self.version == version {
            return Ok(());
        }
        self.write_back(convertor, attributes).await?;
        *self = Self::new(convertor, attributes, version).await?;
        Ok(())
    }

    /// The end of the mutating dispatch: a changed object converted back to the request's version,
    /// into `attributes`.
    pub(crate) async fn write_back(
        &mut self,
        convertor: &mut ObjectConvertor,
        attributes: &mut Attributes,
    ) -> Result<(), String> {
        if !self.dirty {
            return Ok(());
        }
        if let Some(object) = &self.object {
            let back = convertor
                .convert(attributes, object, &self.version, &attributes.version)
                .await?;
            attributes.object = Some(back);
        }
        self.dirty = false;
        Ok(())
    }

    /// `attributes` with these objects: what a webhook invoked at this version is sent and what its
    /// match conditions and selectors see.
    pub(crate) fn view(&self, attributes: &Attributes) -> Attributes {
        Attributes {
            object: self.object.clone(),
            old_object: self.old_object.clone(),
            ..attributes.clone()
        }
    }
}

/// `[object, oldObject]` at a version, or why they could not be converted to it.
type ConvertedObjects = Result<[Option<Value>; 2], String>;

/// The objects an admission policy sees at the version it matched (upstream's policy dispatchers'
/// `NewVersionedAttributes`): each defaulted as stored at the request's version
/// ([`crate::api::rest::validating_admission_policy::matching::presented`]), then converted, once per
/// version.
pub(crate) struct PolicyObjects {
    convertor: ObjectConvertor,
    object: Option<Value>,
    old_object: Option<Value>,
    converted: Vec<(String, ConvertedObjects)>,
}

impl PolicyObjects {
    /// The objects of `req` as `attributes` describe them: the new `object` and the `old` one.
    pub(crate) fn new(
        req: &RestRequest<'_>,
        attributes: &Attributes,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Self {
        let presented = |o: &Value| {
            crate::api::rest::validating_admission_policy::matching::presented(
                req,
                attributes,
                o,
                &attributes.version,
            )
        };
        Self {
            convertor: ObjectConvertor::new(req, attributes),
            object: object.map(presented),
            old_object: old.map(presented),
            converted: Vec::new(),
        }
    }

    /// `[object, oldObject]` at `version`; the error is the converter's text.
    pub(crate) async fn at(
        &mut self,
        attributes: &Attributes,
        version: &str,
    ) -> Result<[Option<Value>; 2], String> {
        if let Some((_, objects)) = self.converted.iter().find(|(v, _)| v == version) {
            return objects.clone();
        }
        let mut objects = [None, None];
        let mut failure = None;
        for (slot, source) in objects.iter_mut().zip([&self.object, &self.old_object]) {
            let Some(source) = source else { continue };
            match self
                .convertor
                .convert(attributes, source, &attributes.version, version)
                .await
            {
                Ok(converted) => *slot = Some(converted),
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        let objects = match failure {
            Some(error) => Err(error),
            None => Ok(objects),
        };
        self.converted.push((version.to_owned(), objects.clone()));
        objects
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::rest::admission::Operation;

    fn attributes() -> Attributes {
        Attributes {
            operation: Operation::Update,
            group: "stable.example.com".to_owned(),
            version: "v2".to_owned(),
            resource: "crontabs".to_owned(),
            subresource: String::new(),
            kind: "CronTab".to_owned(),
            kind_api_version: None,
            namespace: "default".to_owned(),
            name: "tab".to_owned(),
            object: Some(json!({"metadata": {"name": "tab"}, "spec": {"schedule": "new"}})),
            old_object: Some(json!({"metadata": {"name": "tab"}, "spec": {"schedule": "old"}})),
            dry_run: false,
            options: json!({}),
            user: mvp_core::UserInfo::default(),
        }
    }

    #[tokio::test]
    async fn objects_are_relabelled_and_a_changed_one_goes_back_to_the_requests_version() {
        let mut convertor = ObjectConvertor::relabelling();
        let mut a = attributes();
        let mut versioned = Versioned::new(&mut convertor, &a, "v1")
            .await
            .expect("relabelled");
        assert_eq!(
            versioned.object,
            Some(json!({"kind": "CronTab", "apiVersion": "stable.example.com/v1",
                "metadata": {"name": "tab"}, "spec": {"schedule": "new"}}))
        );
        assert_eq!(
            versioned.old_object.as_ref().map(|o| o["apiVersion"].clone()),
            Some(json!("stable.example.com/v1"))
        );
        // Not dirty: converting to another version starts again from the request's objects.
        versioned.object = Some(json!({"spec": {"schedule": "ignored"}}));
        versioned
            .convert_to(&mut convertor, &mut a, "v3")
            .await
            .expect("relabelled");
        assert_eq!(
            versioned.object.as_ref().map(|o| o["spec"]["schedule"].clone()),
            Some(json!("new"))
        );
        // Dirty: the change reaches the request's object, at the request's version.
        versioned.object = Some(
            json!({"apiVersion": "stable.example.com/v3", "metadata": {"name": "tab"},
            "spec": {"schedule": "patched"}}),
        );
        versioned.dirty = true;
        versioned
            .write_back(&mut convertor, &mut a)
            .await
            .expect("relabelled");
        assert_eq!(
            a.object,
            Some(json!({"kind": "CronTab", "apiVersion": "stable.example.com/v2",
                "metadata": {"name": "tab"}, "spec": {"schedule": "patched"}}))
        );
        assert!(!versioned.dirty);
    }

    #[tokio::test]
    async fn a_fixed_kind_keeps_its_own_api_version() {
        let mut convertor = ObjectConvertor::relabelling();
        let mut a = attributes();
        a.kind = "Scale".to_owned();
        a.kind_api_version = Some("autoscaling/v1".to_owned());
        let versioned = Versioned::new(&mut convertor, &a, "v1")
            .await
            .expect("relabelled");
        assert_eq!(
            versioned.object.as_ref().map(|o| o["apiVersion"].clone()),
            Some(json!("autoscaling/v1"))
        );
    }
}
