from django.db import models


class Author(models.Model):
    name = models.CharField(max_length=100)

    class Meta:
        app_label = "litelane_django_app"


class Book(models.Model):
    title = models.CharField(max_length=200)
    author = models.ForeignKey(Author, on_delete=models.CASCADE)
    published = models.DateTimeField(null=True)
    writer = models.CharField(max_length=40, default="")

    class Meta:
        app_label = "litelane_django_app"
