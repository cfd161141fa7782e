from django.db import models


class Hit(models.Model):
    """One acknowledged request: the client and its sequence number."""

    client = models.IntegerField()
    seq = models.IntegerField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "benchapp"
        indexes = [models.Index(fields=["client", "seq"])]
